# Shared by scripts/redis-image.sh and scripts/valkey-image.sh: a store's
# image FROM scratch out of two host binaries and the libraries they
# load. Source it; it defines functions only.
#
#   ctx=$(scratch_rootfs <server binary> <cli binary> <log tag>)
#   scratch_build "$ctx" <image> <repo> <version> <label key> <label value>

# scratch_rootfs makes a build context whose rootfs/ holds server as
# /usr/bin/redis-server (Redis and Valkey pick their personality from
# argv[0]: the file must have that name), cli as /usr/bin/redis-cli (the
# cluster compose file's healthchecks call it), /data, /tmp, and every
# library ldd lists for either, the loader included, at the exact paths
# the loader expects (cp -L copies a symlink's target). It prints the
# context's directory; the caller removes it.
scratch_rootfs() {
  local server="$1" cli="$2" tag="$3"
  local ctx root nlibs=0 path
  ctx="$(mktemp -d "${TMPDIR:-/tmp}/tollgate-$tag-image.XXXXXX")"
  root="$ctx/rootfs"
  mkdir -p "$root/usr/bin" "$root/data"
  install -d -m 1777 "$root/tmp"
  install -m 0755 "$(readlink -f "$server")" "$root/usr/bin/redis-server"
  install -m 0755 "$(readlink -f "$cli")" "$root/usr/bin/redis-cli"
  while read -r path; do
    mkdir -p "$root$(dirname "$path")"
    cp -L "$path" "$root$path"
    nlibs=$((nlibs + 1))
  done < <({ ldd "$server"; ldd "$cli"; } | awk '
    $2 == "=>" && $3 ~ /^\// { print $3; next }   # libfoo.so => /path (0x..)
    $1 ~ /^\//               { print $1 }         # /lib64/ld-linux-x86-64.so.2 (0x..)
  ' | sort -u)
  printf '%s-image: copied %d libraries (incl. loader)\n' "$tag" "$nlibs" >&2
  echo "$ctx"
}

# scratch_build builds ctx's rootfs as image and repo:version, labelled
# key=value (what the scripts compare to decide whether to rebuild), the
# server as its entrypoint with tollgate's test settings.
scratch_build() {
  local ctx="$1" image="$2" repo="$3" version="$4" key="$5" value="$6"
  cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY rootfs/ /
LABEL $key="$value"
EXPOSE 6379
ENTRYPOINT ["/usr/bin/redis-server"]
CMD ["--protected-mode", "no", "--bind", "* -::*", "--save", "", "--appendonly", "no", "--dir", "/data"]
DOCKERFILE
  # Classic builder on purpose: this docker CLI has no buildx plugin (with
  # BuildKit on it errors out "buildx component is missing"), and the
  # classic builder never fetches a frontend image. FROM scratch needs no
  # pull. Each metadata instruction costs ~1 s in the classic builder:
  # keep them few.
  DOCKER_BUILDKIT=0 docker build -t "$image" -t "$repo:$version" "$ctx" >&2
}
