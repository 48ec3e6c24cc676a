# syntax=docker/dockerfile:1
# gpuclaim: one image for `gpuclaim webhook`, `gpuclaim extender` and `gpuclaim certs`.
# Build:  docker build -t ghcr.io/gpuclaim/gpuclaim:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: the project wheel and every dependency wheel, installed into a venv ---------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# Metadata first: the dependency layer is reused while only the sources change.
COPY pyproject.toml README.md ./
# One import package: the servers, the model and the demo's local cluster double are all in it.
COPY gpuclaim/ gpuclaim/
RUN python -m pip wheel --wheel-dir /wheels . \
 && python -m venv /opt/gpuclaim \
 && /opt/gpuclaim/bin/python -m pip install --no-index --find-links /wheels gpuclaim \
 && /opt/gpuclaim/bin/python -m compileall -q /opt/gpuclaim \
 && /opt/gpuclaim/bin/gpuclaim --help >/dev/null

# --- runtime: the slim base plus the venv; no compiler, no pip cache, no sources --------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="gpuclaim" \
      org.opencontainers.image.description="DRA admission webhook and topology-aware kube-scheduler extender for GPUs" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/gpuclaim/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=build /opt/gpuclaim /opt/gpuclaim
# The chart's securityContext.runAsUser/runAsGroup default to the same non-root ids; the root
# filesystem is mounted read-only, so bytecode is precompiled above and HOME points at /tmp.
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["gpuclaim"]
CMD ["--help"]
