// Eigen's product compiled for the scalar tier (flags in bench/CMakeLists.txt).
#define FAK_EIGEN_FN EigenMatMulScalar
#define FAK_EIGEN_INFO_FN EigenSimdScalar
#include "bench/eigen_matmul_body.h"
