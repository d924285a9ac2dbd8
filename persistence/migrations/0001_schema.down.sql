DROP TABLE IF EXISTS deleted_system, system_advisory, advisory, system_package, package, package_name, system, account;
