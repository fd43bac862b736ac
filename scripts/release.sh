#!/usr/bin/env bash
# Builds the release artifacts of the version in VERSION (docs/install.md,
# "Installing a release"):
#
#   allocguard-VERSION.oci.tar         the operator image, built from the
#                                      Dockerfile, as an OCI archive whose one
#                                      reference is the tag VERSION
#   allocguard-VERSION.tgz             the Helm chart, packaged (helm package)
#   allocguard-VERSION.sbom.spdx.json  the image's packages: every Debian
#                                      package and every allocator library it
#                                      ships (scripts/image_sbom.py)
#   SHA256SUMS                         the SHA-256 of the three
#
#   scripts/release.sh [--out DIR]     # default out/release
#
# The image is built with buildah (e2e/images/allocguard.sh: no Docker engine,
# no registry; layers and the compiler cache from earlier builds are reused)
# and named REPOSITORY:VERSION in buildah's storage, REPOSITORY being the
# chart's default image.repository: the packaged chart, installed with its
# defaults, runs exactly this image once it is in a registry or on the nodes.
# Needs buildah, helm (e2e/cluster/build.sh helm builds it) and python3; run
# as root, like buildah's chroot builds. The end-to-end test (e2e/run.sh)
# runs it and installs the chart from these files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/out/release
while (($#)); do
  case $1 in
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "release.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

version=$(head -1 "$root/VERSION")
chart=$root/charts/allocguard
repository=$(sed -n '/^image:/,/^[^ ]/ s/^  repository: *//p' "$chart/values.yaml")
chart_version=$(sed -n 's/^version: *//p' "$chart/Chart.yaml")
[[ -n $repository ]] || { echo "release.sh: no image.repository in $chart/values.yaml" >&2; exit 1; }
[[ $chart_version == "$version" ]] ||
  { echo "release.sh: the chart's version is $chart_version, VERSION says $version" >&2; exit 1; }
command -v helm >/dev/null || {
  echo "release.sh: helm is not on PATH (e2e/cluster/build.sh helm builds it; source e2e/cluster/versions.sh for HELM_BIN)" >&2
  exit 1
}
image=$repository:$version
mkdir -p "$out"
out=$(cd "$out" && pwd)
archive=$out/allocguard-$version.oci.tar
sbom=$out/allocguard-$version.sbom.spdx.json
start=$SECONDS
say() { echo "release.sh: $*" >&2; }

# 1. The image, from the Dockerfile (the operator target only).
built=$("$root/e2e/images/allocguard.sh" --tag "$version" --no-import --operator-only)
buildah tag "$built" "$image"
rm -f "$archive"
# The archive's reference is the bare tag, as OCI layouts name images: a
# loader adds the repository (skopeo copy oci-archive:FILE:VERSION
# docker://REGISTRY/allocguard:VERSION, ctr images import --base-name ...).
buildah push --quiet "$image" "oci-archive:$archive:$version" >/dev/null
say "image $image: $(du -h "$archive" | cut -f1) as $(basename "$archive")"

# 2. What the image contains, from its own root filesystem.
container=$(buildah from --pull=never --quiet "$image")
trap 'buildah umount "$container" >/dev/null 2>&1 || true; buildah rm "$container" >/dev/null 2>&1 || true' EXIT
mnt=$(buildah mount "$container")
python3 "$root/scripts/image_sbom.py" "$mnt" --image "$image" --version "$version" >"$sbom.tmp"
mv "$sbom.tmp" "$sbom"

# 3. The chart.
rm -f "$out/allocguard-$version.tgz"
helm package "$chart" --destination "$out" >/dev/null
say "chart: allocguard-$version.tgz ($(helm show chart "$out/allocguard-$version.tgz" | sed -n 's/^appVersion: //p' | tr -d '"') as appVersion)"

# 4. The checksums, with names relative to the directory (sha256sum -c SHA256SUMS).
(cd "$out" && sha256sum "allocguard-$version.oci.tar" "allocguard-$version.tgz" \
  "allocguard-$version.sbom.spdx.json" >SHA256SUMS)
say "artifacts of $version in $out in $((SECONDS - start)) s:"
(cd "$out" && ls -l "allocguard-$version.oci.tar" "allocguard-$version.tgz" \
  "allocguard-$version.sbom.spdx.json" SHA256SUMS | awk '{printf "release.sh:   %10d  %s\n", $5, $9}' >&2)
echo "$out"
