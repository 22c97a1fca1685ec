// Reference forward pass for tests: the Llama architecture written plainly with Eigen in double
// precision, sharing nothing with the engine but the weights. The oracle the f32 engine is held to.
#ifndef FAK_TESTS_MODEL_REFERENCE_FORWARD_H_
#define FAK_TESTS_MODEL_REFERENCE_FORWARD_H_

#include <Eigen/Dense>

#include <cmath>
#include <vector>

#include "fak/model/model.h"
#include "src/model/model_impl.h"

namespace fak::testing {

using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

inline MatrixD ToMatrix(const internal::WeightTensor& t) {
  MatrixD m(t.rows, t.cols);
  for (size_t i = 0; i < t.rows * t.cols; ++i) m.data()[i] = t.f32()[i];
  return m;
}

inline Eigen::VectorXd RmsNorm(const Eigen::VectorXd& x, const internal::WeightTensor& w, double eps, bool one_plus) {
  double inv = 1.0 / std::sqrt(x.squaredNorm() / x.size() + eps);
  Eigen::VectorXd y(x.size());
  for (Eigen::Index i = 0; i < x.size(); ++i) y[i] = x[i] * inv * ((one_plus ? 1.0 : 0.0) + w.f32()[i]);
  return y;
}

inline void RotateHead(double* v, size_t hd, size_t pos, double base, RopePairing pairing) {
  for (size_t i = 0; i < hd / 2; ++i) {
    double angle = pos * std::pow(base, -2.0 * i / hd);
    size_t a = pairing == RopePairing::kAdjacent ? 2 * i : i;
    size_t b = pairing == RopePairing::kAdjacent ? 2 * i + 1 : i + hd / 2;
    double x0 = v[a], x1 = v[b];
    v[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
    v[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
  }
}

// Logits [n_tokens][vocab] of a fresh sequence.
inline MatrixD ReferenceLogits(const Model& model, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = model.config();
  const internal::ModelWeights& w = internal::ModelAccess::Get(model).weights;
  const size_t n = tokens.size(), hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  MatrixD x(n, c.hidden_size);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < c.hidden_size; ++j) x(i, j) = w.token_embedding.f32()[tokens[i] * c.hidden_size + j];
  for (const internal::LayerWeights& lw : w.layers) {
    MatrixD xn(n, c.hidden_size);
    for (size_t i = 0; i < n; ++i) xn.row(i) = RmsNorm(x.row(i).transpose(), lw.attn_norm, c.rms_eps, false).transpose();
    MatrixD q = xn * ToMatrix(lw.wq).transpose(), k = xn * ToMatrix(lw.wk).transpose(), v = xn * ToMatrix(lw.wv).transpose();
    for (size_t i = 0; i < n; ++i) {
      for (size_t h = 0; h < c.n_heads; ++h) RotateHead(&q(i, h * hd), hd, i, c.rope_base, c.rope_pairing);
      for (size_t h = 0; h < c.n_kv_heads; ++h) RotateHead(&k(i, h * hd), hd, i, c.rope_base, c.rope_pairing);
    }
    MatrixD attn = MatrixD::Zero(n, c.n_heads * hd);
    for (size_t i = 0; i < n; ++i) {
      for (size_t h = 0; h < c.n_heads; ++h) {
        const size_t kvh = h / group;
        Eigen::VectorXd s(i + 1);
        for (size_t t = 0; t <= i; ++t) s[t] = q.row(i).segment(h * hd, hd).dot(k.row(t).segment(kvh * hd, hd)) / std::sqrt(double(hd));
        s = (s.array() - s.maxCoeff()).exp();
        s /= s.sum();
        for (size_t t = 0; t <= i; ++t) attn.row(i).segment(h * hd, hd) += s[t] * v.row(t).segment(kvh * hd, hd);
      }
    }
    x += attn * ToMatrix(lw.wo).transpose();
    for (size_t i = 0; i < n; ++i) xn.row(i) = RmsNorm(x.row(i).transpose(), lw.ffn_norm, c.rms_eps, false).transpose();
    MatrixD g = xn * ToMatrix(lw.w_gate).transpose(), u = xn * ToMatrix(lw.w_up).transpose();
    MatrixD act = (g.array() / (1.0 + (-g.array()).exp()) * u.array()).matrix();
    x += act * ToMatrix(lw.w_down).transpose();
  }
  MatrixD xn(n, c.hidden_size);
  for (size_t i = 0; i < n; ++i) xn.row(i) = RmsNorm(x.row(i).transpose(), w.output_norm, c.rms_eps, false).transpose();
  return xn * ToMatrix(w.output).transpose();
}

}  // namespace fak::testing

#endif  // FAK_TESTS_MODEL_REFERENCE_FORWARD_H_
