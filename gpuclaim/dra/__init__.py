"""The shared DRA model: resource.k8s.io/v1 objects, the Kubernetes DRA CEL environment,
device matching, the allocator simulation, topology. Pure: no network, file or clock I/O."""
