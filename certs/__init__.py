"""TLS: issue CA and serving certificates, inject caBundle, hot reload."""
