package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// tlsMismatchError is an admin request that failed because this command's
// TLS settings do not fit the admin port: a usage error (exit 2), with what
// to change.
type tlsMismatchError struct{ msg string }

func (e *tlsMismatchError) Error() string { return e.msg }

// tlsMismatch says what a TLS failure of a request to base means and what
// to do, or returns nil for a failure that is not about TLS settings; cert
// says whether a client certificate was configured.
// Remote alerts and net/http's plain-HTTP answer have no error types of
// their own, so those are told by their text.
func tlsMismatch(base string, cert bool, err error) error {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	text := err.Error()
	var msg string
	switch {
	case strings.Contains(text, "server gave HTTP response to HTTPS client"):
		msg = fmt.Sprintf("the admin API at %s answers plain HTTP, not HTTPS: drop the -admin-tls-* flags (and MONOLOCK_ADMIN_TLS_*) and use http://, or start the server with -admin-tls-cert and -admin-tls-key", base)
	case strings.Contains(text, "tls: certificate required") && cert:
		// crypto/tls sends no certificate that none of the server's CAs
		// signed.
		msg = fmt.Sprintf("the admin API at %s asks for an operator certificate signed by one of its CAs (-admin-tls-client-ca), and -admin-tls-cert is not signed by any of them: use a certificate from the operators' CA", base)
	case strings.Contains(text, "tls: certificate required"):
		msg = fmt.Sprintf("the admin API at %s asks for an operator certificate: give -admin-tls-cert and -admin-tls-key (env MONOLOCK_ADMIN_TLS_CERT, MONOLOCK_ADMIN_TLS_KEY) with a certificate signed by the server's -admin-tls-client-ca", base)
	case strings.Contains(text, "remote error: tls: unknown certificate authority"),
		strings.Contains(text, "remote error: tls: bad certificate"),
		strings.Contains(text, "remote error: tls: expired certificate"),
		strings.Contains(text, "remote error: tls: certificate revoked"),
		strings.Contains(text, "remote error: tls: unsupported certificate"):
		msg = fmt.Sprintf("the admin API at %s refused the operator certificate (%s): use -admin-tls-cert and -admin-tls-key with a valid certificate signed by a CA in the server's -admin-tls-client-ca", base, strings.TrimPrefix(text[strings.Index(text, "remote error: "):], "remote error: "))
	case errors.As(err, &unknownCA):
		msg = fmt.Sprintf("the admin API at %s shows a certificate signed by a CA this command does not trust: give -admin-tls-ca (env MONOLOCK_ADMIN_TLS_CA) with the CA that signed the server's -admin-tls-cert", base)
	case errors.As(err, &hostname):
		msg = fmt.Sprintf("the admin API's certificate does not name %s (%v): connect by a host name or address the certificate names", hostname.Host, err)
	case errors.As(err, &invalid):
		msg = fmt.Sprintf("the admin API at %s shows an invalid certificate (%v): the server's -admin-tls-cert must be renewed or fixed", base, invalid)
	default:
		return nil
	}
	return &tlsMismatchError{msg: msg}
}
