# Cross-compiling fak for 64-bit ARM Linux with Debian's toolchain (g++-aarch64-linux-gnu) against
# the :arm64 multiarch development packages (scripts/setup installs both). The `aarch64` preset uses
# it; the test binaries run here under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR, so ctest and
# gtest_discover_tests work unchanged).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Multiarch: target libraries under /usr/lib/aarch64-linux-gnu, architecture-independent headers
# (xsimd, Eigen, nlohmann_json) and CMake package files under /usr. Programs come from the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config (hiredis, libmicrohttpd) reads the target's .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

find_program(FAK_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
# No -L prefix: the multiarch libc6:arm64 (a dependency of the :arm64 -dev packages) puts the
# interpreter at /lib/ld-linux-aarch64.so.1, matching its libc.so.6. `-L /usr/aarch64-linux-gnu`
# would pair the cross package's ld.so with that libc, two builds of glibc, and the first
# pthread_create then walks a stack cache at the wrong offset of ld.so's data forever.
if(FAK_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${FAK_QEMU_AARCH64})
endif()
