# Third-party libraries, all from Debian/Ubuntu packages (see .ci/deps for the package names).
find_package(Threads REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(CLI11 2 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
if(BUILD_TESTING)
  find_package(GTest REQUIRED)
  find_package(benchmark REQUIRED)
endif()
# yaml-cpp 0.7 exports the target "yaml-cpp"; newer releases "yaml-cpp::yaml-cpp".
if(NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)
endif()
