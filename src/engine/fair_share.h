// Fair share between tenants: who is admitted next, and in which order prefill chunks are handed
// out. A tenant with twenty waiting requests gets one turn per round, like a tenant with one.
#ifndef FAK_SRC_ENGINE_FAIR_SHARE_H_
#define FAK_SRC_ENGINE_FAIR_SHARE_H_

#include <algorithm>
#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fak::internal {

// Waiting items, first in first out within a tenant, round robin across tenants (in name order,
// resuming after the tenant served last). Not thread-safe.
template <class T>
class TenantQueues {
 public:
  void PushBack(std::string_view tenant, T item) { by_tenant_[std::string(tenant)].push_back(item); ++size_; }
  // Goes first within its tenant, and its tenant's turn comes next (an item put back or preempted
  // does not lose its place).
  void PushFront(std::string_view tenant, T item) {
    by_tenant_[std::string(tenant)].push_front(item);
    next_ = std::string(tenant);
    ++size_;
  }
  // The next tenant's first item; `empty()` must be false.
  T PopNext() {
    return PopNext([](std::string_view, const std::deque<T>&) { return size_t{0}; });
  }
  // The next tenant's item at choose(tenant, line) (an index into its line, in arrival order).
  template <class Choose>
  T PopNext(Choose choose) {
    auto it = by_tenant_.lower_bound(next_);
    if (it == by_tenant_.end()) it = by_tenant_.begin();
    const size_t index = std::min(choose(std::string_view(it->first), std::as_const(it->second)), it->second.size() - 1);
    T item = it->second[index];
    it->second.erase(it->second.begin() + static_cast<std::ptrdiff_t>(index));
    next_ = it->first + '\0';  // the next tenant after this one
    if (it->second.empty()) by_tenant_.erase(it);
    --size_;
    return item;
  }
  // Removes `item` if it waits; returns whether it did.
  bool Remove(std::string_view tenant, T item) {
    auto it = by_tenant_.find(std::string(tenant));
    if (it == by_tenant_.end()) return false;
    auto pos = std::find(it->second.begin(), it->second.end(), item);
    if (pos == it->second.end()) return false;
    it->second.erase(pos);
    if (it->second.empty()) by_tenant_.erase(it);
    --size_;
    return true;
  }
  // Every waiting item, tenants in name order.
  std::vector<T> Items() const {
    std::vector<T> out;
    for (const auto& [tenant, items] : by_tenant_) out.insert(out.end(), items.begin(), items.end());
    return out;
  }
  size_t size() const { return size_; }
  // Items waiting in `tenant`'s line.
  size_t SizeOf(std::string_view tenant) const {
    auto it = by_tenant_.find(std::string(tenant));
    return it == by_tenant_.end() ? 0 : it->second.size();
  }
  bool empty() const { return size_ == 0; }

 private:
  std::map<std::string, std::deque<T>> by_tenant_;  // no empty deques
  std::string next_;                                // the first tenant >= this has the next turn
  size_t size_ = 0;
};

// `items` (each tenant's in the order given) interleaved one per tenant per round: the first of
// every tenant, then the second of every tenant... Tenants take turns in name order starting with
// the one at index `rotation` modulo their count, so no tenant is always served first.
template <class T, class TenantOf>
std::vector<T> RoundRobinByTenant(const std::vector<T>& items, TenantOf tenant_of, size_t rotation) {
  std::map<std::string_view, std::vector<T>> by_tenant;
  for (const T& item : items) by_tenant[tenant_of(item)].push_back(item);
  std::vector<const std::vector<T>*> lines;
  for (const auto& [tenant, line] : by_tenant) lines.push_back(&line);
  std::vector<T> out;
  if (lines.empty()) return out;
  std::rotate(lines.begin(), lines.begin() + rotation % lines.size(), lines.end());
  for (size_t round = 0; out.size() < items.size(); ++round) {
    for (const std::vector<T>* line : lines) {
      if (round < line->size()) out.push_back((*line)[round]);
    }
  }
  return out;
}

}  // namespace fak::internal

#endif  // FAK_SRC_ENGINE_FAIR_SHARE_H_
