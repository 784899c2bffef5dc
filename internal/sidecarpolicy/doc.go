// Package sidecarpolicy compiles a SidecarSet into the MutatingAdmissionPolicy
// and binding with which the API server itself performs the injection the
// pod webhook performs (Policy injection mode). It is pure: no client, no
// cache; the controller in internal/controller/sidecarpolicy applies what it
// returns.
package sidecarpolicy
