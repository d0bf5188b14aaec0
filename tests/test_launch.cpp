// Data parallelism's processes (docs/multi-gpu.md): the launcher gives each rank torchrun's
// environment and stops every rank when one fails, and the rendezvous hands rank 0's id to the
// others or says clearly why it could not. CPU only: the ranks here are shell scripts.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "core/error.h"
#include "test_util.h"
#include "parallel/launch.h"

using namespace loupe;

namespace {
parallel::LaunchOptions sh(const std::string& script, int procs) {
  parallel::LaunchOptions o;
  o.exe = "/bin/sh";
  o.args = {"-c", script};
  o.procs = procs;
  o.grace_seconds = 1;
  return o;
}
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

TEST(Launch, EachRankGetsTorchrunsEnvironment) {
  const auto dir = test::temp_path("launch_env");
  std::filesystem::create_directories(dir);
  const int rc = parallel::run_ranks(sh("echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $NCCL_NVLS_ENABLE\" > " +
                                  dir.string() + "/rank$RANK; echo $MASTER_PORT > " + dir.string() + "/port$RANK", 3));
  EXPECT_EQ(rc, 0);
  std::string port;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(test::slurp(dir / ("rank" + std::to_string(r))),
              std::to_string(r) + " " + std::to_string(r) + " 3 3 127.0.0.1 0\n");
    const std::string p = test::slurp(dir / ("port" + std::to_string(r)));
    if (r == 0) port = p;
    EXPECT_EQ(p, port) << "every rank meets at the same port";
  }
  EXPECT_GT(std::atoi(port.c_str()), 0);
  std::filesystem::remove_all(dir);
}

// The first rank to fail ends the run with its status, the others stopped within the grace period.
TEST(Launch, AFailingRankStopsTheOthers) {
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(parallel::run_ranks(sh("if [ $RANK = 1 ]; then sleep 0.2; exit 3; fi; sleep 60", 3)), 3);
  EXPECT_LT(seconds_since(t0), 10) << "the sleeping ranks were not stopped";
  t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(parallel::run_ranks(sh("if [ $RANK = 0 ]; then kill -9 $$; fi; sleep 60", 2)), 128 + 9) << "killed by SIGKILL";
  EXPECT_LT(seconds_since(t0), 10);
  // A rank that ignores SIGTERM is killed after the grace period.
  t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(parallel::run_ranks(sh("trap '' TERM; if [ $RANK = 1 ]; then exit 5; fi; sleep 60", 2)), 5);
  EXPECT_LT(seconds_since(t0), 10);
  EXPECT_EQ(parallel::run_ranks(sh("exit 0", 4)), 0);
}

// Ctrl-C on the launcher reaches every rank; their exits (130, as loupe's on SIGINT) are the run's
// status, not a failure to name: the ranks stop by themselves.
TEST(Launch, CtrlCStopsEveryRankQuietly) {
  std::thread ctrl_c([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(getpid(), SIGINT);
  });
  const auto t0 = std::chrono::steady_clock::now();
  testing::internal::CaptureStderr();
  const int rc = parallel::run_ranks(sh("trap 'exit 130' INT; while true; do sleep 0.05; done", 3));
  const std::string err = testing::internal::GetCapturedStderr();
  ctrl_c.join();
  EXPECT_EQ(rc, 130);
  EXPECT_LT(seconds_since(t0), 10);
  EXPECT_EQ(err.find("exited with status"), std::string::npos) << err;
}

TEST(Rendezvous, EveryRankGetsRankZerosId) {
  const int port = parallel::free_port(), world = 4;
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = char(i * 7);
  std::vector<std::string> got(world);
  std::vector<std::thread> ts;
  for (int r = world - 1; r >= 0; --r)  // the others first: they wait for rank 0
    ts.emplace_back([&, r] {
      parallel::RendezvousOptions o;
      o.port = port, o.rank = r, o.world = world, o.timeout_seconds = 20;
      got[size_t(r)] = parallel::rendezvous(o, r == 0 ? id : std::string());
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(got[size_t(r)], id) << "rank " << r;
}

// The rendezvous's connections kept as lifelines: a peer that says goodbye ended normally; one
// whose connection closes without it ended otherwise (here its Lifelines are destroyed, as a killed
// process's sockets are closed), and the survivors name it at their next look.
TEST(Rendezvous, LifelinesTellAnEndFromADeath) {
  const int port = parallel::free_port(), world = 3;
  std::vector<std::unique_ptr<parallel::Lifelines>> lines;
  for (int r = 0; r < world; ++r) lines.push_back(std::make_unique<parallel::Lifelines>());
  std::vector<std::thread> ts;
  for (int r = world - 1; r >= 0; --r)
    ts.emplace_back([&, r] {
      parallel::RendezvousOptions o;
      o.port = port, o.rank = r, o.world = world, o.timeout_seconds = 20;
      parallel::rendezvous(o, r == 0 ? "id" : "", lines[size_t(r)].get());
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(lines[0]->size(), 2u);
  EXPECT_EQ(lines[1]->size(), 1u);
  for (auto& l : lines) EXPECT_EQ(l->lost(), "");
  // The first look that sees a change: a closed socket reaches the other end within milliseconds.
  auto settle = [](parallel::Lifelines& l) {
    std::string why;
    for (int i = 0; i < 200 && why.empty(); ++i) {
      why = l.lost();
      if (why.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return why;
  };
  lines[2]->goodbye();
  EXPECT_EQ(settle(*lines[0]), "") << "rank 2 said goodbye";
  lines[1].reset();  // rank 1 dies
  EXPECT_EQ(settle(*lines[0]), "rank 1's connection closed without a goodbye (the process ended)");
  EXPECT_EQ(lines[0]->lost(), "") << "said once";
  // Rank 0 dies too: rank 2 has let go of its lifeline already, so it hears nothing.
  lines[0].reset();
  EXPECT_EQ(lines[2]->lost(), "");
}

// MASTER_ADDR may be a host name (torchrun and clusters give names): "localhost" is resolved.
TEST(Rendezvous, ByHostName) {
  const int port = parallel::free_port();
  std::string got[2];
  std::vector<std::thread> ts;
  for (int r = 1; r >= 0; --r)
    ts.emplace_back([&, r] {
      parallel::RendezvousOptions o;
      o.addr = "localhost", o.port = port, o.rank = r, o.world = 2, o.timeout_seconds = 20;
      got[r] = parallel::rendezvous(o, r == 0 ? "id" : "");
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(got[1], "id");
  parallel::RendezvousOptions bad;
  bad.addr = "no-such-host.invalid", bad.port = port, bad.rank = 1, bad.world = 2, bad.timeout_seconds = 1;
  try {
    parallel::rendezvous(bad);
    FAIL() << "an unresolvable host joined";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot resolve the host 'no-such-host.invalid' (MASTER_ADDR)"),
              std::string::npos) << e.what();
  }
}

// Slurm's srun: its tasks are ranks (loupe's launcher and torchrun: Rendezvous.RankEnvironment).
TEST(RankEnv, SrunTasks) {
  std::vector<std::unique_ptr<test::UnsetEnv>> clean;
  for (const char* v : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                        "LOUPE_RDZV_PORT", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID",
                        "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "LOCAL_WORLD_SIZE",
                        "SLURM_STEP_TASKS_PER_NODE"})
    clean.push_back(std::make_unique<test::UnsetEnv>(v));
  EXPECT_FALSE(parallel::in_a_world());
  EXPECT_EQ(parallel::rank_env().world, 1);
  {  // srun: the step's tasks; the master is the node list's first host, the port from the job id
    test::EnvVar id("SLURM_PROCID", "3"), n("SLURM_STEP_NUM_TASKS", "8"), l("SLURM_LOCALID", "1"),
        nodes("SLURM_STEP_NODELIST", "gpu-a[07-09,12],gpu-b3"), job("SLURM_JOB_ID", "4123456");
    EXPECT_TRUE(parallel::in_a_world());
    parallel::RankEnv e = parallel::rank_env();
    EXPECT_EQ(e.launcher, "srun");
    EXPECT_EQ(e.world, 8);
    EXPECT_EQ(e.rank, 3);
    EXPECT_EQ(e.local_rank, 1);
    EXPECT_EQ(e.local_world, 1) << "unknown without SLURM_STEP_TASKS_PER_NODE";
    EXPECT_EQ(e.master_addr, "gpu-a07");
    EXPECT_EQ(e.master_port, 15000 + 4123456 % 20000);
    EXPECT_EQ(e.rdzv_port, e.master_port);
    test::EnvVar a("MASTER_ADDR", "10.0.0.5"), p("MASTER_PORT", "12345");
    EXPECT_EQ(parallel::rank_env().master_addr, "10.0.0.5");
    EXPECT_EQ(parallel::rank_env().rdzv_port, 12345);
    test::EnvVar tpn("SLURM_STEP_TASKS_PER_NODE", "4(x2)");  // the first host's count: rank 0's
    EXPECT_EQ(parallel::rank_env().local_world, 4);
  }
  {  // a batch script's own step: one task, not a rank (its SLURM_PROCID is 0 all the same)
    test::EnvVar id("SLURM_PROCID", "0"), n("SLURM_STEP_NUM_TASKS", "1");
    EXPECT_FALSE(parallel::in_a_world());
  }
  EXPECT_EQ(parallel::first_slurm_host("node01"), "node01");
  EXPECT_EQ(parallel::first_slurm_host("n[1-3]"), "n1");
  EXPECT_EQ(parallel::first_slurm_host("a[007-010],b"), "a007");
  EXPECT_EQ(parallel::first_slurm_host("x,y[1-2]"), "x");
  EXPECT_EQ(parallel::first_slurm_host("gpu-[3,5]"), "gpu-3");
  EXPECT_THROW(parallel::first_slurm_host("bad["), Error);
}

TEST(Rendezvous, SaysWhoNeverCameAndRefusesADuplicate) {
  int port = parallel::free_port();
  std::string why;
  std::thread peer([&] {
    parallel::RendezvousOptions o;
    o.port = port, o.rank = 1, o.world = 3, o.timeout_seconds = 5;
    try {
      parallel::rendezvous(o);
    } catch (const Error&) {
    }
  });
  parallel::RendezvousOptions o;
  o.port = port, o.rank = 0, o.world = 3, o.timeout_seconds = 1;
  try {
    parallel::rendezvous(o, "id");
  } catch (const Error& e) {
    why = e.what();
  }
  peer.join();
  EXPECT_NE(why.find("1 of the 2 other ranks reached rank 0 at 127.0.0.1:" + std::to_string(port) + " within 1 s"),
            std::string::npos)
      << why;

  port = parallel::free_port();
  why.clear();
  std::vector<std::thread> twins;
  for (int k = 0; k < 2; ++k)
    twins.emplace_back([&] {
      parallel::RendezvousOptions p;
      p.port = port, p.rank = 1, p.world = 3, p.timeout_seconds = 5;
      try {
        parallel::rendezvous(p);
      } catch (const Error&) {
      }
    });
  o.port = port, o.timeout_seconds = 5;
  try {
    parallel::rendezvous(o, "id");
  } catch (const Error& e) {
    why = e.what();
  }
  for (auto& t : twins) t.join();
  EXPECT_NE(why.find("two processes say they are rank 1"), std::string::npos) << why;
}

TEST(Rendezvous, RankEnvironment) {
  test::UnsetEnv a("WORLD_SIZE"), b("RANK"), c("LOCAL_RANK"), d("MASTER_ADDR"), e("MASTER_PORT"),
      f("TORCHELASTIC_RUN_ID"), g("LOUPE_RDZV_PORT"), h("LOCAL_WORLD_SIZE");
  EXPECT_EQ(parallel::rank_env().world, 1) << "not a rank: world 1";
  setenv("WORLD_SIZE", "4", 1);
  setenv("RANK", "6", 1);
  setenv("MASTER_PORT", "29500", 1);
  EXPECT_THROW(parallel::rank_env(), Error) << "RANK >= WORLD_SIZE";
  setenv("RANK", "3", 1);
  setenv("LOCAL_RANK", "1", 1);
  parallel::RankEnv env = parallel::rank_env();
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.world, 4);
  EXPECT_EQ(env.local_world, 1) << "unknown without LOCAL_WORLD_SIZE";
  {
    test::EnvVar lw("LOCAL_WORLD_SIZE", "2");
    EXPECT_EQ(parallel::rank_env().local_world, 2);
  }
  EXPECT_EQ(env.master_addr, "127.0.0.1");
  EXPECT_EQ(env.master_port, 29500);
  EXPECT_EQ(env.rdzv_port, 29500) << "loupe's rendezvous on MASTER_PORT";
  EXPECT_TRUE(parallel::in_a_world());
  {  // a host name, and torchrun: its agent's store holds MASTER_PORT, so the rendezvous takes the next
    test::EnvVar a("MASTER_ADDR", "node7"), t("TORCHELASTIC_RUN_ID", "none");
    EXPECT_EQ(parallel::rank_env().master_addr, "node7");
    EXPECT_EQ(parallel::rank_env().launcher, "torchrun");
    EXPECT_EQ(parallel::rank_env().rdzv_port, 29501);
    test::EnvVar own("LOUPE_RDZV_PORT", "31000");
    EXPECT_EQ(parallel::rank_env().rdzv_port, 31000);
  }
  setenv("RANK", "x", 1);
  EXPECT_THROW(parallel::rank_env(), Error);
}

// A port out of range is said to be one (MASTER_PORT=99999 was told "needs MASTER_PORT"), and
// world_variables names what made this process a rank: WORLD_SIZE, or srun's variables.
TEST(RankEnv, MessagesNameTheVariablesSet) {
  std::vector<std::unique_ptr<test::UnsetEnv>> clean;
  for (const char* v : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
                        "LOUPE_RDZV_PORT", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_NTASKS",
                        "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_JOB_ID", "LOCAL_WORLD_SIZE"})
    clean.push_back(std::make_unique<test::UnsetEnv>(v));
  auto refusal = [] {
    try {
      parallel::rank_env();
    } catch (const Error& e) {
      const std::string what = e.what();
      return what.substr(0, what.find("  ["));  // without LOUPE_CHECK's source location
    }
    return std::string();
  };
  {
    test::EnvVar w("WORLD_SIZE", "2"), r("RANK", "0");
    EXPECT_EQ(refusal(), "a world of 2 needs MASTER_PORT (the port rank 0 listens on)");
    EXPECT_EQ(parallel::world_variables(), "WORLD_SIZE=2");
    for (const char* port : {"99999", "65536"}) {
      test::EnvVar p("MASTER_PORT", port);
      EXPECT_EQ(refusal(), "MASTER_PORT=" + std::string(port) + " is out of range: a port is 1-65535");
    }
    test::EnvVar p("MASTER_PORT", "65535");
    EXPECT_EQ(refusal(), "");
  }
  {
    test::EnvVar id("SLURM_PROCID", "1"), n("SLURM_STEP_NUM_TASKS", "2"), nodes("SLURM_STEP_NODELIST", "n1");
    EXPECT_EQ(parallel::world_variables(), "SLURM_PROCID=1 and SLURM_STEP_NUM_TASKS=2");
    test::EnvVar p("MASTER_PORT", "70000");
    EXPECT_EQ(refusal(), "MASTER_PORT=70000 is out of range: a port is 1-65535");
  }
  EXPECT_EQ(parallel::world_variables(), "");
}
