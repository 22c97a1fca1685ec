// A real 3-master Redis Cluster for tests: three redis-servers with cluster support on free
// loopback ports, joined by `redis-cli --cluster create`, waited for until every node reports
// cluster_state:ok. A node timeout of 2 s and no full-coverage requirement, so the other masters
// keep serving their slots while one is stopped. Start one per test suite (a few seconds).
#ifndef FAK_TESTS_STORE_REDIS_CLUSTER_TEST_UTIL_H_
#define FAK_TESTS_STORE_REDIS_CLUSTER_TEST_UTIL_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tests/store/redis_test_util.h"
#include "tests/store/store_test_util.h"

namespace fak::testing {

class RedisClusterForTest {
 public:
  static constexpr int kMasters = 3;

  ::testing::AssertionResult Start() {
    const std::string cli = RedisServerBinary().substr(0, RedisServerBinary().rfind('/')) + "/redis-cli";
    if (::access(cli.c_str(), X_OK) != 0) return ::testing::AssertionFailure() << "no redis-cli next to redis-server";
    std::string create = cli + " --cluster create";
    for (int i = 0; i < kMasters; ++i) {
      dirs_.push_back(std::make_unique<ScopedTempDir>());
      servers_.push_back(std::make_unique<RedisServer>(dirs_.back()->path()));
      ::testing::AssertionResult up = servers_.back()->Start({"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                                              "--cluster-node-timeout", "2000",
                                                              "--cluster-require-full-coverage", "no"},
                                                             /*max_port=*/55535);
      if (!up) return up;
      create += " 127.0.0.1:" + std::to_string(servers_.back()->port());
    }
    create += " --cluster-replicas 0 --cluster-yes >" + dirs_[0]->path() + "/create.log 2>&1";
    if (std::system(create.c_str()) != 0) return ::testing::AssertionFailure() << "redis-cli --cluster create failed: " << create;
    for (int attempt = 0; attempt < 100; ++attempt) {  // up to 10 s
      int ok = 0;
      for (const auto& s : servers_) {
        RawRedis raw(s->port());
        if (raw.Command({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos) ++ok;
      }
      if (ok == kMasters) return ::testing::AssertionSuccess();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ::testing::AssertionFailure() << "the cluster did not reach cluster_state:ok";
  }

  RedisServer& node(int i) { return *servers_[static_cast<size_t>(i)]; }
  // Options that name the first node only: the rest is discovered.
  RedisOptions Options(const std::string& prefix) const {
    RedisOptions o = servers_[0]->Options();
    o.prefix = prefix;
    return o;
  }
  // The node whose slots hold `key` (it answers anything but MOVED for it), or -1.
  int OwnerOf(const std::string& key) {
    for (int i = 0; i < kMasters; ++i) {
      RawRedis raw(node(i).port());
      if (raw.Command({"TYPE", key}).rfind("-MOVED", 0) != 0) return i;
    }
    return -1;
  }
  std::string Id(int i) {
    RawRedis raw(node(i).port());
    const std::string id = raw.Command({"CLUSTER", "MYID"});
    return id.empty() ? id : id.substr(1);  // RawRedis marks a bulk reply with '$'
  }
  // Keys stored on node i.
  int64_t KeysOn(int i) {
    RawRedis raw(node(i).port());
    const std::string n = raw.Command({"DBSIZE"});
    return n.size() > 1 ? std::stoll(n.substr(1)) : -1;
  }

 private:
  std::vector<std::unique_ptr<ScopedTempDir>> dirs_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

}  // namespace fak::testing

#endif  // FAK_TESTS_STORE_REDIS_CLUSTER_TEST_UTIL_H_
