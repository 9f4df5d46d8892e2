package main

import "net/http"

// adminHandler serves the admin API.
func (d *daemon) adminHandler() http.Handler {
	return http.NotFoundHandler()
}
