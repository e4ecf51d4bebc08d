// gapbench type-check shim, NOT an Apple header: the few declarations metal-cpp needs from
// this macOS framework, written by gapbench so the Metal host code can be compiled for
// aarch64-macos on Linux (zig c++), where no macOS SDK frameworks exist. Never used in a real
// macOS build, which takes the SDK's own headers.
#pragma once
typedef struct __IOSurface* IOSurfaceRef;
