-- MariaDB form of ../095_quota_classes.sql (same number).
CREATE TABLE quota_classes (
    id BIGINT PRIMARY KEY AUTO_INCREMENT,
    class_name VARCHAR(191) NOT NULL,
    resource VARCHAR(191) NOT NULL,
    hard_limit BIGINT NOT NULL,
    UNIQUE (class_name, resource)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
