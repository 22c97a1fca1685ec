/* FAK_EXPORT: marks what libfak exports, for C and C++ alike (fak/c/ headers include it too).
 *
 * libfak is compiled with -fvisibility=hidden -fvisibility-inlines-hidden, so a shared build
 * exports only what carries this mark: the public C++ API declared in include/fak/ and the fak_*
 * C functions. Mark a free function or variable on its declaration, and a class (not its members)
 * when it has out-of-line members or virtual functions, so its vtable and typeinfo are exported
 * too and a host can subclass it. Plain aggregates and inline code need no mark. The ctest
 * fak_exports fails when anything else is exported (docs/architecture.md §10). */
#ifndef FAK_CORE_EXPORT_H_
#define FAK_CORE_EXPORT_H_

/* C++ takes the standard attribute spelling, which may follow another attribute
 * (`class [[nodiscard]] FAK_EXPORT Status`) where __attribute__ may not. */
#if defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__))
#define FAK_EXPORT [[gnu::visibility("default")]]
#elif defined(__GNUC__) || defined(__clang__)
#define FAK_EXPORT __attribute__((visibility("default")))
#else
#define FAK_EXPORT
#endif

#endif /* FAK_CORE_EXPORT_H_ */
