// Element types and devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace loupe {

enum class DType : int32_t { f32 = 0, f64 = 1, f16 = 2, bf16 = 3, i32 = 4, u8 = 5 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name);  // "f32", "float32", ... ; throws on unknown
inline bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }

enum class DeviceType : int32_t { CPU = 0, CUDA = 1 };
constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
};
inline const Device kCPU{DeviceType::CPU};
inline const Device kCUDA{DeviceType::CUDA};

// Parses "cpu", "cuda", "cuda:0", "gpu"; throws a user-facing Error otherwise.
Device parse_device(const std::string& s);

// The conversions fp32 <-> fp16/bf16 on the host, round to nearest even.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);

}  // namespace loupe
