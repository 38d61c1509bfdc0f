// SPDX-License-Identifier: BSD-3-Clause
#include "cuda_libraries.hpp"

#include <dlfcn.h>

#include <string>

#include "ex2d/status.hpp"

// The name a member has after the headers' macros (cublasCreate -> "cublasCreate_v2").
#define EX2D_SYMBOL_NAME(member) EX2D_SYMBOL_NAME_EXPANDED(member)
#define EX2D_SYMBOL_NAME_EXPANDED(member) #member

namespace ex2d::cuda {

namespace {

void* open_library(const char* soname)
{
    const std::string in_toolkit = std::string(EX2D_CUDA_LIBRARY_DIR) + "/" + soname;
    if (void* library = dlopen(in_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL)) return library;
    if (void* library = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) return library;
    const char* reason = dlerror();
    throw Error(std::string("CUDA backend: cannot load ") + soname + " (looked in " +
                EX2D_CUDA_LIBRARY_DIR +
                " and the loader's path): " + (reason ? reason : "unknown reason"));
}

template <class Function>
void resolve(void* library, const char* soname, const char* symbol, Function& member)
{
    void* address = dlsym(library, symbol);
    if (address == nullptr) {
        throw Error(std::string("CUDA backend: ") + soname + " has no " + symbol);
    }
    member = reinterpret_cast<Function>(address);
}

CudaLibraries load()
{
    CudaLibraries libs{};
    void* blas = open_library(EX2D_CUBLAS_SONAME);
    void* solver = open_library(EX2D_CUSOLVER_SONAME);
    auto from_blas = [&](const char* symbol, auto& member) {
        resolve(blas, EX2D_CUBLAS_SONAME, symbol, member);
    };
    auto from_solver = [&](const char* symbol, auto& member) {
        resolve(solver, EX2D_CUSOLVER_SONAME, symbol, member);
    };
#define EX2D_FROM_BLAS(member) from_blas(EX2D_SYMBOL_NAME(member), libs.member)
#define EX2D_FROM_SOLVER(member) from_solver(EX2D_SYMBOL_NAME(member), libs.member)
    EX2D_FROM_BLAS(cublasCreate);
    EX2D_FROM_BLAS(cublasDestroy);
    EX2D_FROM_BLAS(cublasSetStream);
    EX2D_FROM_BLAS(cublasSetWorkspace);
    EX2D_FROM_BLAS(cublasGetStatusString);
    EX2D_FROM_BLAS(cublasDgemmStridedBatched);
    EX2D_FROM_BLAS(cublasDtrsmBatched);
    EX2D_FROM_SOLVER(cusolverDnCreate);
    EX2D_FROM_SOLVER(cusolverDnDestroy);
    EX2D_FROM_SOLVER(cusolverDnSetStream);
    EX2D_FROM_SOLVER(cusolverDnCreateParams);
    EX2D_FROM_SOLVER(cusolverDnDestroyParams);
    EX2D_FROM_SOLVER(cusolverDnSetAdvOptions);
    EX2D_FROM_SOLVER(cusolverDnSetDeterministicMode);
    EX2D_FROM_SOLVER(cusolverDnDpotrfBatched);
    EX2D_FROM_SOLVER(cusolverDnDpotrsBatched);
    EX2D_FROM_SOLVER(cusolverDnDsyevd_bufferSize);
    EX2D_FROM_SOLVER(cusolverDnDsyevd);
    EX2D_FROM_SOLVER(cusolverDnXsyevBatched_bufferSize);
    EX2D_FROM_SOLVER(cusolverDnXsyevBatched);
#undef EX2D_FROM_BLAS
#undef EX2D_FROM_SOLVER
    return libs;
}

}  // namespace

const CudaLibraries& cuda_libraries()
{
    // A static's initialiser runs once, under the compiler's lock; one that throws runs again
    // on the next call.
    static const CudaLibraries libraries = load();
    return libraries;
}

}  // namespace ex2d::cuda
