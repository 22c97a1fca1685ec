// Small helpers for the demo's human-readable output: section headings, aligned key/value lines,
// a table printer and a progress bar (only when stdout is a terminal).
#ifndef FAK_EXAMPLES_DEMO_REPORT_H_
#define FAK_EXAMPLES_DEMO_REPORT_H_

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace fak::demo {

inline void Section(int n, const std::string& title) { std::printf("\n[%d] %s\n", n, title.c_str()); }

inline void Line(const std::string& key, const std::string& value) {
  std::printf("  %-22s %s\n", key.c_str(), value.c_str());
}

inline std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

inline std::string Short(const std::string& hex) { return hex.substr(0, 12) + "…"; }

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print() const {
    std::vector<size_t> width(rows_[0].size(), 0);
    for (const auto& r : rows_)
      for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    for (size_t k = 0; k < rows_.size(); ++k) {
      std::printf("  ");
      for (size_t i = 0; i < rows_[k].size(); ++i) std::printf(i == 0 ? "%-*s" : "  %*s", int(width[i]), rows_[k][i].c_str());
      std::printf("\n");
      if (k == 0) {
        std::printf("  ");
        for (size_t i = 0; i < width.size(); ++i) std::printf("%s%s", i ? "  " : "", std::string(width[i], '-').c_str());
        std::printf("\n");
      }
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

// "label [#####.....] 5/10" redrawn in place on a terminal; silent otherwise.
inline void Progress(const std::string& label, size_t done, size_t total) {
  if (!isatty(STDOUT_FILENO)) return;
  const int width = 30, filled = total ? int(width * done / total) : width;
  std::printf("\r  %-20s [%s%s] %zu/%zu", label.c_str(), std::string(filled, '#').c_str(),
              std::string(width - filled, '.').c_str(), done, total);
  if (done == total) std::printf("\r%*s\r", 80, "");
  std::fflush(stdout);
}

}  // namespace fak::demo

#endif  // FAK_EXAMPLES_DEMO_REPORT_H_
