# The project set up as scripts/bootstrap.sh does (.venv with the test,
# speed, torch and ray extras, iproute2 and mosquitto), for the nodes of a Ray cluster, e.g. on
# Kubernetes with KubeRay (deploy/kuberay/raycluster.yaml; docs/guides/ray-kuberay.md).
#   docker build -t icn-net:latest .
FROM python:3.11-slim

# KubeRay's health probes call wget; bash runs the set-up script and KubeRay's start command
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends wget bash \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY . /app
RUN scripts/bootstrap.sh && rm -rf /root/.cache/pip /var/lib/apt/lists/*

# the venv first on the PATH, for login shells too (KubeRay starts Ray with bash -l): ray, icn
# and python are the project's, and so are the Ray workers that run the node agents
ENV PATH=/app/.venv/bin:$PATH
RUN echo 'export PATH=/app/.venv/bin:$PATH' > /etc/profile.d/icn-venv.sh

CMD ["icn", "--help"]
