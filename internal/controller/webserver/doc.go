// Package webserver reconciles WebServers: each one owns a Deployment and a
// Service of its name, kept in line with its spec by server-side apply
// without fighting the other managers of those objects.
package webserver
