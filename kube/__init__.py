"""The only package that talks to kube-apiserver: config, the list/watch cluster view, template creation."""
