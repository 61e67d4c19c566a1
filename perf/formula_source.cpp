// SPDX-License-Identifier: MIT
// Prints what ensemblefit generates for a formula (src/model/formula_jit.cpp), for
// perf/formula.sh ptxas and for reading:
//   formula_source cpp|cuda-model|nvrtc FORMULA PARAMS VARS   (PARAMS, VARS comma-separated)
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <ensemblefit/model/formula.hpp>

#include "src/model/formula_jit.hpp"

namespace {

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ',')) out.push_back(item);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: formula_source cpp|cuda-model|nvrtc FORMULA PARAMS VARS\n");
        return 2;
    }
    const std::string what = argv[1];
    const ef::FormulaProgram prog = ef::compile_formula(argv[2], split(argv[3]), split(argv[4]));
    std::string out;
    if (what == "cpp") out = ef::formula_cpp_source({&prog});
    else if (what == "cuda-model") out = ef::formula_cuda_model(prog, "FormulaJitModel");
    else out = ef::formula_nvrtc_source(prog);
    std::fputs(out.c_str(), stdout);
    return 0;
}
