// Built into libloupe only by LOUPE_SANITIZE with both address and undefined (CMakeLists.txt).
//
// With gcc, UBSan's runtime (libubsan) sits beside ASan's (libasan) and ignores log_path: its
// call to __sanitizer_set_report_path binds to libasan's copy, so UBSan's reports always go to
// stderr. A test that expects the loupe command to fail and checks only its exit status would not
// see one. libubsan calls __ubsan_on_report (weak in libubsan; this definition, earlier in the
// lookup order, wins) for every error it reports: this writes the error and its stack through
// libasan, i.e. to ASan's log_path where tools/sanitize.sh looks (and to stderr without it).
#include <cstdio>

extern "C" {
void __ubsan_get_current_report_data(const char** kind, const char** message, const char** file,
                                     unsigned* line, unsigned* column, char** address);
void __sanitizer_report_error_summary(const char* summary);
void __sanitizer_print_stack_trace();

__attribute__((visibility("default"))) void __ubsan_on_report() {
  const char *kind = "?", *message = "", *file = "?";
  unsigned line = 0, column = 0;
  char* address = nullptr;
  __ubsan_get_current_report_data(&kind, &message, &file, &line, &column, &address);
  char text[2048];
  std::snprintf(text, sizeof text, "UndefinedBehaviorSanitizer: %s at %s:%u:%u: %s (UBSan's own report is on stderr)",
                kind, file, line, column, message);
  __sanitizer_report_error_summary(text);
  __sanitizer_print_stack_trace();
}
}
