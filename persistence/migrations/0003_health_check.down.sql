DROP TABLE IF EXISTS health_check;
