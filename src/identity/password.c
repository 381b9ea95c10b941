/* password.c - password hashing for identity users.
 *
 * Passwords are stored as crypt(3) strings made by libxcrypt with yescrypt
 * ("$y$…", the algorithm Debian uses for /etc/shadow) and a fresh random salt
 * per hash. Verification recomputes the hash with the stored string as the
 * setting and compares in constant time. Plaintext is never stored or
 * logged. */
#include "identity/identity_int.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

char *nb_idn_password_hash(const char *password)
{
    if (!password)
        return NULL;
    char *setting = crypt_gensalt_ra("$y$", 0, NULL, 0);
    if (!setting)
        return NULL;
    void *data = NULL;
    int size = 0;
    char *result = NULL;
    const char *h = crypt_ra(password, setting, &data, &size);
    /* libxcrypt returns a string starting with '*' on failure. */
    if (h && h[0] != '*')
        result = strdup(h);
    free(data);
    free(setting);
    return result;
}

bool nb_idn_password_verify(const char *password, const char *hash)
{
    if (!password || !hash || !*hash || hash[0] == '*')
        return false;
    void *data = NULL;
    int size = 0;
    bool ok = false;
    const char *h = crypt_ra(password, hash, &data, &size);
    if (h && h[0] != '*') {
        size_t n = strlen(hash);
        ok = strlen(h) == n && CRYPTO_memcmp(h, hash, n) == 0;
    }
    free(data);
    return ok;
}
