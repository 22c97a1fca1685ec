// Eigen's product compiled for the avx512 tier (flags in bench/CMakeLists.txt).
#define FAK_EIGEN_FN EigenMatMulAvx512
#define FAK_EIGEN_INFO_FN EigenSimdAvx512
#include "bench/eigen_matmul_body.h"
