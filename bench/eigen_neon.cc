// Eigen's product compiled for the neon tier (aarch64; flags in bench/CMakeLists.txt).
#define FAK_EIGEN_FN EigenMatMulNeon
#define FAK_EIGEN_INFO_FN EigenSimdNeon
#include "bench/eigen_matmul_body.h"
