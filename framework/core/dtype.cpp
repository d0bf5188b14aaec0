#include "core/dtype.h"

#include <cstring>

#include "core/error.h"

namespace loupe {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f64: return 8;
    case DType::f16: case DType::bf16: return 2;
    case DType::u8: return 1;
  }
  LOUPE_FAIL("unknown dtype ", int(t));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::u8: return "uint8";
  }
  return "?";
}

DType dtype_from_name(const std::string& n) {
  if (n == "f32" || n == "float32" || n == "fp32") return DType::f32;
  if (n == "f64" || n == "float64" || n == "fp64") return DType::f64;
  if (n == "f16" || n == "float16" || n == "fp16") return DType::f16;
  if (n == "bf16" || n == "bfloat16") return DType::bf16;
  if (n == "i32" || n == "int32") return DType::i32;
  if (n == "u8" || n == "uint8") return DType::u8;
  throw Error("unknown dtype '" + n + "' (use float32, float64, float16, bfloat16, int32 or uint8)");
}

std::string Device::str() const { return is_cuda() ? "cuda:" + std::to_string(index) : "cpu"; }

Device parse_device(const std::string& s) {
  if (s == "cpu") return kCPU;
  if (s == "cuda" || s == "gpu") return kCUDA;
  if (s.rfind("cuda:", 0) == 0) return Device(DeviceType::CUDA, std::stoi(s.substr(5)));
  throw Error("unknown device '" + s + "': use --device cpu or --device cuda");
}

static uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static float float_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

uint16_t float_to_half(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  int32_t exp = int32_t((x >> 23) & 0xff);
  if (exp == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0));  // inf / nan
  int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return uint16_t(sign | 0x7c00u);  // overflow to inf
  if (e <= 0) {                                      // subnormal or zero
    if (e < -10) return uint16_t(sign);
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - e);
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // may carry into the exponent: correct
  return uint16_t(sign | h);
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  if (exp == 0x1f) return float_from_bits(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return float_from_bits(sign);
    float v = float(mant) / 16777216.0f;  // mant * 2^-24
    return sign ? -v : v;
  }
  return float_from_bits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // keep NaN a NaN
  x += 0x7fffu + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

float bf16_to_float(uint16_t h) { return float_from_bits(uint32_t(h) << 16); }

}  // namespace loupe
