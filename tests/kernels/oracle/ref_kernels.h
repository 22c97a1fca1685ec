// Reference kernels: plain double-precision loops, the oracle the tier kernels are tested against.
// Test-only (header-only, never compiled into a tier TU). As plain as llama2.c's run.c on purpose.
#ifndef FAK_KERNELS_REF_REF_KERNELS_H_
#define FAK_KERNELS_REF_REF_KERNELS_H_

#include <cmath>
#include <cstddef>
#include <vector>

namespace fak::kernels::ref {

inline double Dot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// y[m][n] = sum_k x[m][k] w[n][k]
inline std::vector<double> MatMul(const float* x, const float* w, size_t m, size_t k, size_t n) {
  std::vector<double> y(m * n);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) y[i * n + j] = Dot(x + i * k, w + j * k, k);
  return y;
}

inline std::vector<double> RmsNorm(const float* x, const float* w, size_t n, double eps, bool one_plus) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  double inv = 1.0 / std::sqrt(ss / n + eps);
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] * inv * ((one_plus ? 1.0 : 0.0) + w[i]);
  return y;
}

inline std::vector<double> Softmax(const std::vector<double>& x) {
  double mx = x.empty() ? 0 : x[0];
  for (double v : x) mx = v > mx ? v : mx;
  std::vector<double> y(x.size());
  double sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += (y[i] = std::exp(x[i] - mx));
  for (double& v : y) v /= sum;
  return y;
}

inline double Silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double GeluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// One query row: out[h] = sum_t softmax_t(scale q_h·k_t) v_t over keys [key_begin, key_end).
inline std::vector<double> Attention(const float* q, const float* k, const float* v, size_t n_heads,
                                     size_t n_kv_heads, size_t head_dim, size_t kv_head_stride, size_t key_begin,
                                     size_t key_end, double scale) {
  std::vector<double> out(n_heads * head_dim, 0.0);
  size_t group = n_heads / n_kv_heads;
  for (size_t h = 0; h < n_heads; ++h) {
    const float* kh = k + (h / group) * kv_head_stride;
    const float* vh = v + (h / group) * kv_head_stride;
    std::vector<double> s;
    for (size_t t = key_begin; t < key_end; ++t) s.push_back(scale * Dot(q + h * head_dim, kh + t * head_dim, head_dim));
    s = Softmax(s);
    for (size_t t = key_begin; t < key_end; ++t)
      for (size_t d = 0; d < head_dim; ++d) out[h * head_dim + d] += s[t - key_begin] * vh[t * head_dim + d];
  }
  return out;
}

// Rotation of one head at `position` with base-derived frequencies, in double.
inline std::vector<double> Rope(const float* x, size_t head_dim, size_t position, double base, bool adjacent) {
  std::vector<double> y(x, x + head_dim);
  size_t half = head_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    double angle = position * std::pow(base, -2.0 * i / head_dim);
    size_t a = adjacent ? 2 * i : i, b = adjacent ? 2 * i + 1 : i + half;
    y[a] = x[a] * std::cos(angle) - x[b] * std::sin(angle);
    y[b] = x[a] * std::sin(angle) + x[b] * std::cos(angle);
  }
  return y;
}

}  // namespace fak::kernels::ref

#endif  // FAK_KERNELS_REF_REF_KERNELS_H_
