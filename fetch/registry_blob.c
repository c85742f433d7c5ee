/* registry_blob.c — fetch/registry.json embedded in the binary, so that
 * sb-fetch needs no data file at run time (--registry FILE overrides it).
 * The Makefile names registry.json as a prerequisite of this object, so an
 * edit to the JSON rebuilds it. */
__asm__(".section .rodata\n"
        ".global sbf_registry_blob\n"
        ".global sbf_registry_blob_end\n"
        "sbf_registry_blob:\n"
        ".incbin \"fetch/registry.json\"\n"
        "sbf_registry_blob_end:\n"
        ".byte 0\n"
        ".previous\n");
