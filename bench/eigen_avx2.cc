// Eigen's product compiled for the avx2 tier (flags in bench/CMakeLists.txt).
#define FAK_EIGEN_FN EigenMatMulAvx2
#define FAK_EIGEN_INFO_FN EigenSimdAvx2
#include "bench/eigen_matmul_body.h"
