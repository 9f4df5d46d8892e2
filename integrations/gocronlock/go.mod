module github.com/monolock/monolock/integrations/gocronlock

go 1.26.0

require (
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/google/uuid v1.6.0
	github.com/jonboulle/clockwork v0.5.0
	github.com/monolock/monolock v0.0.0
)

require github.com/robfig/cron/v3 v3.0.1 // indirect

replace github.com/monolock/monolock => ../../
