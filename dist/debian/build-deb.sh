#!/bin/sh
# Builds the Debian package from a built binary and its man pages:
#   dist/debian/build-deb.sh BINARY OUTDIR [MANDIR]  ->  OUTDIR/xdpdns_VERSION_ARCH.deb
# (MANDIR: the pages `cargo xtask docs` writes, *.8 and *.5)
# `cargo xtask deb` runs it on the release build; a test installs the
# result (dpkg -i) and checks what it put where.
set -eu
bin=$1
out=$2
man=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

install -D -m 0755 "$bin" "$stage/usr/bin/xdpdns"
install -D -m 0644 "$root/dist/xdpdns.service" "$stage/lib/systemd/system/xdpdns.service"
install -D -m 0644 "$here/xdpdns.toml" "$stage/etc/xdpdns/xdpdns.toml"
install -D -m 0644 "$root/examples/example.com.zone" "$stage/etc/xdpdns/zones/example.com.zone"
install -D -m 0644 "$root/README.md" "$stage/usr/share/doc/xdpdns/README.md"
install -D -m 0644 "$here/copyright" "$stage/usr/share/doc/xdpdns/copyright"
install -D -m 0644 "$root/dist/grafana/xdpdns.json" "$stage/usr/share/xdpdns/grafana/xdpdns.json"
if [ -n "$man" ]; then
    for page in "$man"/*.8 "$man"/*.5; do
        [ -e "$page" ] || continue
        section=${page##*.}
        install -D -m 0644 "$page" "$stage/usr/share/man/man$section/$(basename "$page")"
        gzip -9n "$stage/usr/share/man/man$section/$(basename "$page")"
    done
fi
mkdir -p "$stage/DEBIAN"
for script in postinst prerm postrm; do
    install -m 0755 "$here/$script" "$stage/DEBIAN/$script"
done
printf '/etc/xdpdns/xdpdns.toml\n/etc/xdpdns/zones/example.com.zone\n' > "$stage/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: xdpdns
Version: $version
Architecture: $arch
Maintainer: xdpdns developers <xdpdns@localhost>
Installed-Size: $size
Depends: libc6, adduser, init-system-helpers
Section: net
Priority: optional
Homepage: https://github.com/xdpdns/xdpdns
Description: authoritative DNS server with an XDP fast path
 Answers hot A/AAAA queries in the kernel with an XDP program and
 everything else from a standards-complete userspace server. Zones come
 from zone files, zone transfers (with TSIG) and live service
 registrations through an HTTP API. Ships a systemd unit (Type=notify),
 an example configuration and a Grafana dashboard.
CONTROL
mkdir -p "$out"
dpkg-deb --root-owner-group "${DEB_COMPRESSION:--Zxz}" --build "$stage" "$out/xdpdns_${version}_${arch}.deb" >&2
echo "$out/xdpdns_${version}_${arch}.deb"
