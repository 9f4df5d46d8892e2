package conformance

func e2eScenarios() []Scenario { return nil }
