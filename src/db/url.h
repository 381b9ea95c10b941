/* url.h - [database] connection, as operators paste it from nova.conf.
 *
 *   (unset)                       SQLite at <state_path>/nubo.sqlite
 *   sqlite:///ABS/PATH            SQLite file (the path after "sqlite://")
 *   /ABS/PATH                     SQLite file
 *   mysql://U:P@HOST[:PORT]/DB[?k=v&...]       MariaDB (also mysql+pymysql://,
 *   mysql+mysqldb://, mariadb://, mariadb+pymysql://); U and P are
 *   percent-decoded as SQLAlchemy does; ?unix_socket=/path and ?charset= are
 *   read, the other parameters (read_default_file, plugin, ...) ignored.
 * Pure: no I/O, no logging. */
#ifndef NB_DB_URL_H
#define NB_DB_URL_H

#include <stdbool.h>
#include <stddef.h>

enum nb_db_kind { NB_DB_SQLITE = 0, NB_DB_MARIADB = 1 };

struct nb_db_url {
    enum nb_db_kind kind;
    char path[1100]; /* SQLite */
    char user[128];
    char password[256];
    char host[256]; /* "" = localhost */
    int port;       /* 0 = default (3306) */
    char database[128];
    char unix_socket[512];
    char charset[32]; /* "" = utf8mb4 */
    int ignored;      /* number of query parameters ignored */
};

/* Parses conn (NULL or "" = the default SQLite file under state_path).
 * 0, or -1 with a message for the operator in err. */
int nb_db_url_parse(const char *conn, const char *state_path, struct nb_db_url *u, char *err,
                    size_t errlen);

/* True when conn starts with one of the MariaDB schemes above. */
bool nb_db_url_is_mariadb(const char *conn);

/* conn as messages and logs may show it: a MariaDB URL's password
 * replaced by ***; anything else as it is. Into buf[n]; returns buf. */
const char *nb_db_url_display(const char *conn, char *buf, size_t n);

#endif
