/* migrations.h - the compiled-in schema migrations (generated table). */
#ifndef NB_MIGRATIONS_H
#define NB_MIGRATIONS_H

struct nb_migration {
    int version;
    const char *name;
    const char *sql;
};

/* Ordered by version, terminated by {0, NULL, NULL}. */
extern const struct nb_migration nb_migrations[];
/* The same numbers in MariaDB's dialect (migrations/mariadb/). */
extern const struct nb_migration nb_migrations_mariadb[];

#endif
