// Package sidecarpolicy is the controller of the SidecarSet Policy injection
// mode: for every SidecarSet in Policy mode it maintains the
// MutatingAdmissionPolicy and binding internal/sidecarpolicy compiles, and
// reports them in the InjectionPolicyReady condition.
package sidecarpolicy
