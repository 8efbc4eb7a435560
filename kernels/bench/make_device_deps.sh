#!/usr/bin/env bash
# Fills .device/deps (an ignored folder) with this Debian machine's headers, static libraries and
# CMake package files of the project's C++ dependencies, for a GPU machine that lacks them:
# run_on_device.sh points CMAKE_PREFIX_PATH at it. Name .device in the device tool's `carry`.
# yaml-cpp is re-pointed at its static library so nothing needs to be installed there.
set -euo pipefail
cd "$(dirname "$0")/../.."
D=.device/deps
A=/usr/lib/x86_64-linux-gnu
rm -rf "$D"
mkdir -p "$D/include/google" "$D/lib/x86_64-linux-gnu/cmake" "$D/share/cmake" "$D/share/eigen3" "$D/bin"
cp -r /usr/include/{eigen3,CLI,nlohmann,yaml-cpp,gtest,gmock,benchmark} "$D/include/"
cp -r /usr/include/google/protobuf "$D/include/google/"
cp $A/libyaml-cpp.a $A/libgtest*.a $A/libgmock*.a $A/libbenchmark_main.a $A/libbenchmark.so.1.* "$D/lib/x86_64-linux-gnu/"
cp $A/libprotobuf.so.32.* $A/libprotoc.so.32.* "$D/lib/x86_64-linux-gnu/"
(
  cd "$D/lib/x86_64-linux-gnu"
  ln -sf libbenchmark.so.1.* libbenchmark.so.1debian && ln -sf libbenchmark.so.1debian libbenchmark.so
  ln -sf libprotobuf.so.32.* libprotobuf.so.32 && ln -sf libprotobuf.so.32 libprotobuf.so
  ln -sf libprotoc.so.32.* libprotoc.so.32 && ln -sf libprotoc.so.32 libprotoc.so
)
cp /usr/bin/protoc "$D/bin/"
cp -r $A/cmake/{yaml-cpp,GTest,benchmark} "$D/lib/x86_64-linux-gnu/cmake/"
cp -r /usr/share/cmake/{nlohmann_json,CLI11} "$D/share/cmake/"
cp -r /usr/share/eigen3/cmake "$D/share/eigen3/"
y="$D/lib/x86_64-linux-gnu/cmake/yaml-cpp"
sed -i 's#libyaml-cpp.so.0.7.0#libyaml-cpp.a#g; /IMPORTED_SONAME_NONE/d' "$y/yaml-cpp-targets-none.cmake"
sed -i 's/SHARED IMPORTED/STATIC IMPORTED/' "$y/yaml-cpp-targets.cmake"
du -sh "$D"
