/*===- main.c - Embedding a tcc artifact in a C program with libtccrt ------===
 *
 *   tccrt-example-c model.tcc [num_threads]
 *
 * Loads the artifact, prints its inputs and outputs, fills the inputs with deterministic
 * pseudo-random values, runs it and prints the first values of each output. Exits non-zero with
 * tccrt_last_error() on any failure.
 *===----------------------------------------------------------------------===*/
#include "tcc/Runtime/tccrt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dtype_name(tccrt_dtype d) {
  static const char *names[] = {"bool", "i8",  "i16", "i32", "i64", "u8",  "u16",
                                "u32",  "u64", "f16", "bf16", "f32", "f64"};
  return (unsigned)d < sizeof(names) / sizeof(names[0]) ? names[d] : "?";
}

static void print_info(const char *what, size_t i, const tccrt_tensor_info *info) {
  printf("%s %zu: %s %s[", what, i, info->name, dtype_name(info->dtype));
  for (int64_t d = 0; d < info->rank; ++d)
    printf("%s%lld", d ? ", " : "", (long long)info->shape[d]);
  printf("] (%zu bytes)\n", info->bytes);
}

static int fail(const char *what) {
  fprintf(stderr, "error: %s: %s\n", what, tccrt_last_error());
  return 1;
}

/* A 32-bit xorshift generator: the same values on every platform. */
static uint32_t next_random(uint32_t *state) {
  uint32_t x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return *state = x;
}

/* float -> IEEE half bits for the values used here (k / 8, k in [-8, 8]: exact, normal). */
static uint16_t half_bits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  if ((bits & 0x7fffffffu) == 0)
    return sign;
  int32_t exponent = (int32_t)((bits >> 23) & 0xff) - 127 + 15;
  return (uint16_t)(sign | (uint16_t)(exponent << 10) | (uint16_t)((bits >> 13) & 0x3ffu));
}

static void fill(void *data, const tccrt_tensor_info *info, uint32_t *state) {
  size_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};
  size_t n = info->bytes / sizes[info->dtype];
  for (size_t i = 0; i < n; ++i) {
    uint32_t r = next_random(state);
    float f = (float)((int)(r % 17) - 8) / 8.0f; /* in [-1, 1], exact in every float type */
    uint32_t fbits;
    memcpy(&fbits, &f, 4);
    switch (info->dtype) {
    case TCCRT_BOOL: ((uint8_t *)data)[i] = (uint8_t)(r & 1); break;
    case TCCRT_I8: ((int8_t *)data)[i] = (int8_t)(r % 10); break;
    case TCCRT_I16: ((int16_t *)data)[i] = (int16_t)(r % 10); break;
    case TCCRT_I32: ((int32_t *)data)[i] = (int32_t)(r % 10); break;
    case TCCRT_I64: ((int64_t *)data)[i] = (int64_t)(r % 10); break;
    case TCCRT_U8: ((uint8_t *)data)[i] = (uint8_t)(r % 10); break;
    case TCCRT_U16: ((uint16_t *)data)[i] = (uint16_t)(r % 10); break;
    case TCCRT_U32: ((uint32_t *)data)[i] = r % 10; break;
    case TCCRT_U64: ((uint64_t *)data)[i] = r % 10; break;
    case TCCRT_F16: ((uint16_t *)data)[i] = half_bits(f); break;
    case TCCRT_BF16: ((uint16_t *)data)[i] = (uint16_t)(fbits >> 16); break;
    case TCCRT_F32: ((float *)data)[i] = f; break;
    case TCCRT_F64: ((double *)data)[i] = f; break;
    }
  }
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  float magnitude;
  if (exponent == 0)
    magnitude = (float)mantissa / 16777216.0f; /* 2^-24 per unit */
  else if (exponent == 31)
    magnitude = mantissa ? 0.0f / 0.0f : 1.0f / 0.0f;
  else {
    uint32_t bits = ((exponent + 112) << 23) | (mantissa << 13);
    memcpy(&magnitude, &bits, 4);
  }
  return sign ? -magnitude : magnitude;
}

static void print_values(const void *data, const tccrt_tensor_info *info, size_t count) {
  size_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 2, 4, 8};
  size_t n = info->bytes / sizes[info->dtype];
  printf("  %s:", info->name);
  for (size_t i = 0; i < n && i < count; ++i) {
    switch (info->dtype) {
    case TCCRT_BOOL: printf(" %d", ((const uint8_t *)data)[i] != 0); break;
    case TCCRT_I8: printf(" %d", ((const int8_t *)data)[i]); break;
    case TCCRT_I16: printf(" %d", ((const int16_t *)data)[i]); break;
    case TCCRT_I32: printf(" %d", ((const int32_t *)data)[i]); break;
    case TCCRT_I64: printf(" %lld", (long long)((const int64_t *)data)[i]); break;
    case TCCRT_U8: printf(" %u", ((const uint8_t *)data)[i]); break;
    case TCCRT_U16: printf(" %u", ((const uint16_t *)data)[i]); break;
    case TCCRT_U32: printf(" %u", ((const uint32_t *)data)[i]); break;
    case TCCRT_U64: printf(" %llu", (unsigned long long)((const uint64_t *)data)[i]); break;
    case TCCRT_F16: printf(" %g", half_to_float(((const uint16_t *)data)[i])); break;
    case TCCRT_BF16: {
      uint32_t bits = (uint32_t)((const uint16_t *)data)[i] << 16;
      float f;
      memcpy(&f, &bits, 4);
      printf(" %g", f);
      break;
    }
    case TCCRT_F32: printf(" %g", ((const float *)data)[i]); break;
    case TCCRT_F64: printf(" %g", ((const double *)data)[i]); break;
    }
  }
  printf(n > count ? " ... (%zu values)\n" : "\n", n);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s model.tcc [num_threads]\n", argv[0]);
    return 2;
  }
  printf("%s\n", tccrt_version());
  tccrt_options options = {argc == 3 ? atoi(argv[2]) : 0};
  tccrt_program *program = NULL;
  if (tccrt_load_file(argv[1], &options, &program) != TCCRT_OK)
    return fail("loading the artifact");

  size_t num_inputs = tccrt_num_inputs(program), num_outputs = tccrt_num_outputs(program);
  const void **inputs = calloc(num_inputs + 1, sizeof(void *));
  void **outputs = calloc(num_outputs + 1, sizeof(void *));
  tccrt_tensor_info *output_info = calloc(num_outputs + 1, sizeof(tccrt_tensor_info));
  int status = 0;
  uint32_t state = 0x12345678u;
  for (size_t i = 0; i < num_inputs && !status; ++i) {
    tccrt_tensor_info info;
    if (tccrt_input_info(program, i, &info) != TCCRT_OK) {
      status = fail("reading input info");
      break;
    }
    print_info("input", i, &info);
    void *data = tccrt_alloc(info.bytes);
    if (!data) {
      status = fail("allocating an input");
      break;
    }
    fill(data, &info, &state);
    inputs[i] = data;
  }
  for (size_t i = 0; i < num_outputs && !status; ++i) {
    if (tccrt_output_info(program, i, &output_info[i]) != TCCRT_OK) {
      status = fail("reading output info");
      break;
    }
    print_info("output", i, &output_info[i]);
    if (!(outputs[i] = tccrt_alloc(output_info[i].bytes)))
      status = fail("allocating an output");
  }
  if (!status) {
    if (tccrt_run(program, inputs, outputs) != TCCRT_OK) {
      status = fail("running the artifact");
    } else {
      printf("outputs:\n");
      for (size_t i = 0; i < num_outputs; ++i)
        print_values(outputs[i], &output_info[i], 8);
    }
  }
  for (size_t i = 0; i < num_inputs; ++i)
    tccrt_free((void *)inputs[i]);
  for (size_t i = 0; i < num_outputs; ++i)
    tccrt_free(outputs[i]);
  free(inputs);
  free(outputs);
  free(output_info);
  tccrt_program_free(program);
  return status;
}
