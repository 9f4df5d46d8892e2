package conformance

import "strconv"

func uintString(v uint64) string { return strconv.FormatUint(v, 10) }
