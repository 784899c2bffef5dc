// Package updateorder orders the pods of a rollout by the update priority
// and scatter strategies, for every kind that rolls changes out to pods.
package updateorder
