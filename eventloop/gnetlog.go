package eventloop

import "github.com/rs/zerolog"

// gnetLogger routes gnet's own log lines into the server's zerolog logger.
// Msgf formats only when the level is enabled.
type gnetLogger struct{ log zerolog.Logger }

func (l gnetLogger) Debugf(format string, args ...any) {
	l.log.Debug().Str("component", "gnet").Msgf(format, args...)
}
func (l gnetLogger) Infof(format string, args ...any) {
	l.log.Debug().Str("component", "gnet").Msgf(format, args...)
}
func (l gnetLogger) Warnf(format string, args ...any) {
	l.log.Warn().Str("component", "gnet").Msgf(format, args...)
}
func (l gnetLogger) Errorf(format string, args ...any) {
	l.log.Error().Str("component", "gnet").Msgf(format, args...)
}
func (l gnetLogger) Fatalf(format string, args ...any) {
	l.log.Error().Str("component", "gnet").Msgf(format, args...)
}
