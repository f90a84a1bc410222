/*
 * A Kafka cluster for the tests: librdkafka's mock cluster, which speaks the
 * real Kafka protocol on loopback ports. Usage: mock_cluster BROKERS
 * [TOPIC:PARTITIONS ...]. Prints the bootstrap servers on the first line of
 * stdout, then runs until its stdin closes (the test process ends) or it is
 * killed.
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  int brokers = argc > 1 ? atoi(argv[1]) : 1;
  char errstr[512];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (rk == NULL) {
    fprintf(stderr, "rd_kafka_new: %s\n", errstr);
    return 1;
  }
  rd_kafka_mock_cluster_t *cluster = rd_kafka_mock_cluster_new(rk, brokers < 1 ? 1 : brokers);
  if (cluster == NULL) {
    fprintf(stderr, "rd_kafka_mock_cluster_new failed\n");
    return 1;
  }
  for (int i = 2; i < argc; i++) {
    char *colon = strchr(argv[i], ':');
    int partitions = colon == NULL ? 1 : atoi(colon + 1);
    if (colon != NULL) *colon = '\0';
    if (rd_kafka_mock_topic_create(cluster, argv[i], partitions, 1) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      fprintf(stderr, "could not create topic %s\n", argv[i]);
      return 1;
    }
  }
  printf("%s\n", rd_kafka_mock_cluster_bootstraps(cluster));
  fflush(stdout);
  char line[256];
  while (fgets(line, sizeof line, stdin) != NULL) {
  }
  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(rk);
  return 0;
}
