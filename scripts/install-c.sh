#!/usr/bin/env bash
# Builds libmemq (the C ABI, ffi/) for C and C++ programs and installs it like any C
# library:
#
#   PREFIX/include/memq.h
#   PREFIX/lib/libmemq.so.VERSION        SONAME libmemq.so.MAJOR (Linux)
#   PREFIX/lib/libmemq.so.MAJOR -> libmemq.so.VERSION
#   PREFIX/lib/libmemq.so       -> libmemq.so.MAJOR     (what -lmemq finds)
#   PREFIX/lib/libmemq.a
#   PREFIX/lib/pkgconfig/memq.pc          pkg-config memq [--static]
#   PREFIX/lib/cmake/memq/memqConfig.cmake, memqConfigVersion.cmake
#                                         find_package(memq): memq::memq, memq::memq_static
#
# Usage: scripts/install-c.sh [--prefix DIR] [--libdir DIR] [--no-build]
#   --prefix DIR  where to install (default /usr/local)
#   --libdir DIR  where the libraries go (default PREFIX/lib)
#   --no-build    install what the last build left in target/release-c
#   DESTDIR=DIR   staged install (packagers): files go to DESTDIR/PREFIX/..., and the
#                 pkg-config and CMake files still name PREFIX
#
# The build uses cargo's `release-c` profile (Cargo.toml): optimised, no debug info. Only
# cargo and a POSIX toolchain are needed; nothing is downloaded but the crates cargo
# fetches. After installing into a prefix the dynamic linker does not search (anything
# but /usr/lib and, on most systems, /usr/local/lib), run `ldconfig` as root there, or
# link programs with `-Wl,-rpath,PREFIX/lib`, or set LD_LIBRARY_PATH=PREFIX/lib to run
# them.
set -euo pipefail

prefix=/usr/local
libdir=
build=1
while [ $# -gt 0 ]; do
    case $1 in
    --prefix) prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --libdir) libdir=$2; shift 2 ;;
    --libdir=*) libdir=${1#*=}; shift ;;
    --no-build) build=0; shift ;;
    -h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-c.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $prefix in /*) ;; *) prefix=$(cd "$prefix" 2>/dev/null && pwd || echo "$PWD/$prefix") ;; esac
libdir=${libdir:-$prefix/lib}
destdir=${DESTDIR:-}

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
major=${version%%.*}
target=${CARGO_TARGET_DIR:-target}/release-c

if [ $build = 1 ]; then
    # Only the two C library kinds: the rlib that the Rust tests use is not built, which
    # lets link-time optimisation cut the static library down to what the ABI reaches.
    echo "+ cargo rustc -p memq-ffi --lib --profile release-c --crate-type cdylib,staticlib"
    cargo rustc -p memq-ffi --lib --profile release-c --crate-type cdylib,staticlib
fi
for f in libmemq.so libmemq.a; do
    [ -f "$target/$f" ] || { echo "install-c.sh: $target/$f is missing (build first)" >&2; exit 1; }
done

# The system libraries a program linking libmemq.a needs, from what
# `cargo rustc -p memq-ffi -- --print native-static-libs` reports for Linux with glibc
# (`-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc`: Rust's std needs unwinding, threads,
# time, dynamic loading) less what the C compiler driver adds itself: libc, and the
# unwinder (libgcc_s, or libgcc_eh in a `-static` link, which has no libgcc_s to link).
# A C link that fails with undefined symbols from the static library means this list
# needs updating (the check stage links programs with `pkg-config --static` and with
# CMake's memq::memq_static to catch that).
static_libs="-lutil -lrt -lpthread -lm -ldl"

inc_dir=$destdir$prefix/include
lib_dir=$destdir$libdir
pc_dir=$lib_dir/pkgconfig
cmake_dir=$lib_dir/cmake/memq
mkdir -p "$inc_dir" "$lib_dir" "$pc_dir" "$cmake_dir"

install -m 644 include/memq.h "$inc_dir/memq.h"
install -m 755 "$target/libmemq.so" "$lib_dir/libmemq.so.$version"
ln -sf "libmemq.so.$version" "$lib_dir/libmemq.so.$major"
ln -sf "libmemq.so.$major" "$lib_dir/libmemq.so"
install -m 644 "$target/libmemq.a" "$lib_dir/libmemq.a"
# The standard library's objects inside the archive come with their debug info; drop it
# (the profile already left it out of memq's own code).
if command -v strip >/dev/null 2>&1; then
    strip --strip-debug "$lib_dir/libmemq.a"
fi

cat >"$pc_dir/memq.pc" <<EOF
prefix=$prefix
includedir=\${prefix}/include
libdir=$libdir

Name: memq
Description: In-process message queue: topics, subscribers, consumer groups (C ABI)
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -lmemq
Libs.private: $static_libs
EOF

cat >"$cmake_dir/memqConfig.cmake" <<EOF
# memq's CMake package: find_package(memq) gives
#   memq::memq         the shared library (libmemq.so)
#   memq::memq_static  the static library (libmemq.a) with the system libraries it needs
# Relocatable: paths are found from this file's place (LIBDIR/cmake/memq).
include(CMakeFindDependencyMacro)
find_dependency(Threads)

get_filename_component(_memq_libdir "\${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
get_filename_component(_memq_prefix "$prefix" ABSOLUTE)
set(_memq_includedir "\${_memq_prefix}/include")
if(NOT EXISTS "\${_memq_includedir}/memq.h")
    get_filename_component(_memq_includedir "\${_memq_libdir}/../include" ABSOLUTE)
endif()

if(NOT TARGET memq::memq)
    add_library(memq::memq SHARED IMPORTED)
    set_target_properties(memq::memq PROPERTIES
        IMPORTED_LOCATION "\${_memq_libdir}/libmemq.so.$version"
        IMPORTED_SONAME "libmemq.so.$major"
        INTERFACE_INCLUDE_DIRECTORIES "\${_memq_includedir}")
endif()
if(NOT TARGET memq::memq_static)
    add_library(memq::memq_static STATIC IMPORTED)
    set_target_properties(memq::memq_static PROPERTIES
        IMPORTED_LOCATION "\${_memq_libdir}/libmemq.a"
        INTERFACE_INCLUDE_DIRECTORIES "\${_memq_includedir}"
        INTERFACE_LINK_LIBRARIES "Threads::Threads;util;rt;m;dl")
endif()

set(memq_VERSION "$version")
set(memq_INCLUDE_DIRS "\${_memq_includedir}")
set(memq_LIBRARIES memq::memq)
unset(_memq_libdir)
unset(_memq_prefix)
unset(_memq_includedir)
EOF

ptr_bits=$(getconf LONG_BIT 2>/dev/null || echo 64)
cat >"$cmake_dir/memqConfigVersion.cmake" <<EOF
# find_package(memq X.Y.Z) accepts this version ($version) if it is at least X.Y.Z and
# compatible: the same major version (for 0.x, the same minor version too, as Cargo
# reads versions).
set(PACKAGE_VERSION "$version")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
if(PACKAGE_FIND_VERSION)
    string(REPLACE "." ";" _memq_have "\${PACKAGE_VERSION}")
    list(GET _memq_have 0 _memq_have_major)
    list(GET _memq_have 1 _memq_have_minor)
    if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
        # too new a version asked for
    elseif(NOT PACKAGE_FIND_VERSION_MAJOR EQUAL _memq_have_major)
        # another major version
    elseif(_memq_have_major EQUAL 0 AND NOT PACKAGE_FIND_VERSION_MINOR EQUAL _memq_have_minor)
        # 0.x: another minor version
    else()
        set(PACKAGE_VERSION_COMPATIBLE TRUE)
        if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
            set(PACKAGE_VERSION_EXACT TRUE)
        endif()
    endif()
else()
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
# Built for $ptr_bits-bit pointers: a project built for others cannot use it.
if(CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P EQUAL $((ptr_bits / 8)))
    set(PACKAGE_VERSION "\${PACKAGE_VERSION} ($ptr_bits-bit)")
    set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
EOF

echo "installed memq $version into ${destdir}$prefix:"
ls -l "$inc_dir/memq.h" "$lib_dir"/libmemq.* "$pc_dir/memq.pc" "$cmake_dir"/*.cmake
