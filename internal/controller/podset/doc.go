// Package podset implements the PodSet controller: a ReplicaSet-grade pod
// controller (expectations, slow-start batches, upstream scale-down order,
// adoption and release) that also rolls template changes out itself, by
// recreating pods within maxUnavailable/maxSurge or by patching container
// images in place.
package podset
