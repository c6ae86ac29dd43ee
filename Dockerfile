# The tollgate gateway on an empty base: nothing is pulled. The binary is
# built outside Docker (CGO_ENABLED=0, static) and the CA bundle copied from
# the build host, for rediss:// and https:// upstreams; both land in bin/
# (scripts/gateway-image.sh, or `make image`).
FROM scratch
COPY bin/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY bin/tollgate /tollgate
# /bin/ratelimit is tollgate: a Deployment written for envoyproxy/ratelimit
# (Envoy Gateway's: command ["/bin/ratelimit"]) runs tollgate, which reads
# envoyproxy/ratelimit's environment under that name. A directory copy
# keeps the link a link.
COPY bin/links/ /
USER 65534:65534
EXPOSE 8080 8081 9090
ENTRYPOINT ["/tollgate"]
