// Device buffers for perf_tests (--mem device): CUDA runtime calls behind plain types, so
// the harness builds without CUDA (then every call reports that the build has none).
#pragma once

#include <cstddef>
#include <string>

namespace perf {

// Whether device buffers can be used here; the reason in *why when not.
bool deviceUsable(std::string* why);
int deviceCount();

// Device memory and a stream for one rank, on the calling thread's device.
class DeviceBuffers {
 public:
  DeviceBuffers() = default;
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  // Makes dev current for the calling thread and creates the stream. Empty on success.
  std::string init(int dev);
  // Sizes both buffers (reallocating when they grow). Empty on success.
  std::string resize(size_t sendBytes, size_t recvBytes);
  char* send() const { return send_; }
  char* recv() const { return recv_; }
  void* stream() const { return stream_; }
  std::string toDevice(char* dst, const void* src, size_t bytes);
  std::string toHost(void* dst, const char* src, size_t bytes);
  std::string sync();  // waits for the stream

 private:
  char* send_ = nullptr;
  char* recv_ = nullptr;
  size_t sendCap_ = 0, recvCap_ = 0;
  void* stream_ = nullptr;
};

}  // namespace perf
