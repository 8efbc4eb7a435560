// Prints "<name>: <layers> layers" for the model config named on the command line, through the
// installed headers and libraries (built by the ctest install_find_package).
#include <exception>
#include <iostream>

#include "sim/config/model_config.hpp"
#include "sim/step/simulation.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer <model config>\n";
    return 2;
  }
  try {
    const sparsering::ModelConfig model = sparsering::load_model(argv[1]);
    std::cout << model.name << ": " << model.layers << " layers\n";
  } catch (const std::exception& error) {
    std::cerr << error.what() << "\n";
    return 2;
  }
  return 0;
}
