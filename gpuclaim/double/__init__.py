"""The local cluster double that `gpuclaim demo` runs: a Kubernetes API double with its admission
chain, the resourceclaim controller and a scheduler double. Doubles, not Kubernetes: they model what
gpuclaim needs of the API and say what they leave out."""
